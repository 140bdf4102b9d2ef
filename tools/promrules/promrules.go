// Command promrules checks vm-controller's alerting rules the way `promtool check rules`
// does, with Prometheus' own rule-file parser and PromQL parser: every group and rule is
// well formed and every expression parses. Its test (promrules_test.go) then evaluates the
// rules with Prometheus' PromQL engine over synthetic series, to show that each alert fires
// when it should and only then.
//
// It is a module of its own, so that the root module (and `go test ./...` there) does not
// take Prometheus' dependencies; `make test-rules` runs it.
//
//	go run . [rules.yaml ...]   (default: docs/monitoring/prometheus-rules.yaml)
package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/rules"
)

// defaultRules is the rule file the project ships, from this directory.
var defaultRules = filepath.Join("..", "..", "docs", "monitoring", "prometheus-rules.yaml")

// promParser parses as a Prometheus server does by default: no experimental functions, so
// that a rule that needs a feature flag fails here as it would fail to load there.
var promParser = parser.NewParser(parser.Options{})

// alert is one alerting rule of a file, ready to evaluate.
type alert struct {
	group string
	rule  *rules.AlertingRule
}

// load reads and checks a rule file: the file's structure (rulefmt, unknown fields
// refused), each expression through the PromQL parser, and each alert built as the rule
// manager builds it. Recording rules are checked but not returned: the file has none, and
// the test evaluates alerts.
func load(path string) ([]alert, error) {
	groups, errs := rulefmt.ParseFile(path, false, model.UTF8Validation, promParser, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		return nil, fmt.Errorf("check rules: %w", errors.Join(errs...)) // each names the file
	}
	var out []alert
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			expr, err := promParser.ParseExpr(r.Expr)
			if err != nil {
				return nil, fmt.Errorf("%s: group %s, rule %s%s: %w", path, g.Name, r.Alert, r.Record, err)
			}
			if r.Alert == "" {
				continue
			}
			out = append(out, alert{group: g.Name, rule: rules.NewAlertingRule(r.Alert, expr,
				time.Duration(r.For), time.Duration(r.KeepFiringFor),
				labels.FromMap(r.Labels), labels.FromMap(r.Annotations), labels.EmptyLabels(), "",
				true, slog.New(slog.DiscardHandler))})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no alerting rule", path)
	}
	return out, nil
}

func main() {
	files := os.Args[1:]
	if len(files) == 0 {
		files = []string{defaultRules}
	}
	failed := false
	for _, f := range files {
		alerts, err := load(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			failed = true
			continue
		}
		fmt.Printf("%s: SUCCESS: %d alerting rules found\n", f, len(alerts))
	}
	if failed {
		os.Exit(1)
	}
}
