// Logging: one set-up for every command that logs (run, webhook, migrate), so that each has
// --log-level and --log-format and every line the process writes, client-go's included, is in
// the format asked for.

package command

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/urfave/cli/v2"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// logFlags are --log-level and --log-format.
type logFlags struct {
	LogLevel  string
	LogFormat string
}

// flags are the two flags; format is the command's default format.
func (f *logFlags) flags(format string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error", EnvVars: env("LOG_LEVEL"), Destination: &f.LogLevel},
		&cli.StringFlag{Name: "log-format", Value: format, Usage: "text or json", EnvVars: env("LOG_FORMAT"), Destination: &f.LogFormat},
	}
}

// validate checks both flags; each error names its flag.
func (f logFlags) validate() error {
	_, err := f.logger(io.Discard)
	return err
}

// setUp makes the logger on w and makes it the process's: slog's default, and client-go's
// (klog), whose own lines would otherwise be in a format of their own.
func (f logFlags) setUp(w io.Writer) (*slog.Logger, error) {
	log, err := f.logger(w)
	if err != nil {
		return nil, cli.Exit(err.Error(), 2)
	}
	slog.SetDefault(log)
	klog.SetSlogLogger(log)
	rest.SetDefaultWarningHandlerWithContext(apiWarnings{log})
	return log, nil
}

// apiWarnings logs the warnings the API server sends with its answers (a Warning header of
// code 299: a deprecated API, a VM name longer than a pod's hostname takes) at WARN, with the
// text as an attribute. client-go's own handler logs each through klog at INFO, the text as
// the message ("Warning: metadata.name: ..."), where a search for warnings misses it.
type apiWarnings struct{ log *slog.Logger }

func (w apiWarnings) HandleWarningHeaderWithContext(ctx context.Context, code int, _ string, text string) {
	if code != 299 || text == "" {
		return // client-go's rule: 299 is the one code the API server sends, with a text
	}
	w.log.WarnContext(ctx, "The API server warned", "warning", text)
}

func (f logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.LogLevel)); err != nil {
		return nil, fmt.Errorf("%s %q: want debug, info, warn or error", flagRef("log-level", f.LogLevel), f.LogLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch f.LogFormat {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("%s %q: want text or json", flagRef("log-format", f.LogFormat), f.LogFormat)
	}
}
