// The migrate command: the storage version migration (package storageversion), run once.

package command

import (
	"errors"
	"fmt"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"
	"k8s.io/client-go/rest"

	"github.com/cloudnative-czs/vm-controller/storageversion"
)

// migrateQPS and migrateBurst are the migrate client's rate limit, ten times client-go's
// default of 5 requests a second. A pass over the VMs must end before its continue token
// expires, 5 to 10 minutes after the pass began: at 5 a second that is 1,500 VMs, at 50 it
// is 15,000. A run that outlasts a token still ends (package storageversion skips what it has
// rewritten), but each pass from the start lists everything again. It is still a limit, not
// none as run's default: each rewrite is a conversion and an etcd write, and a run makes
// thousands of them back to back, beside the controller's and the users' requests.
const (
	migrateQPS   = 50
	migrateBurst = 100
)

// migrateConfig is the migrate command's configuration.
type migrateConfig struct {
	clusterFlags
	CRD      string
	PageSize int64
	Continue string
	logFlags
}

func migrateCommand(c *migrateConfig) *cli.Command {
	flags := append(c.clusterFlags.flags(),
		crdFlag(&c.CRD, "the CRD whose objects to migrate"),
		&cli.Int64Flag{Name: "page-size", Value: 500, Usage: "objects per list page", EnvVars: env("PAGE_SIZE"), Destination: &c.PageSize},
		&cli.StringFlag{Name: "continue", Usage: "resume from this continue token (the last one a run logged; it expires 5 to 10 minutes after its list began, and then the run starts over); empty: from the start", EnvVars: env("CONTINUE"), Destination: &c.Continue},
	)
	flags = append(flags, c.logFlags.flags("text")...)
	return &cli.Command{
		Name:         "migrate",
		Usage:        "rewrite every VirtualMachine in the CRD's storage version, then trim status.storedVersions (safe to run again)",
		Flags:        flags,
		OnUsageError: usageError,
		Action:       action(c, noArgs, func(cc *cli.Context) error { return migrateStorage(cc, *c) }),
	}
}

// Validate refuses an empty CRD name and a page size the API server would not honour, every
// problem at once.
func (c migrateConfig) Validate() error {
	var errs []error
	if c.CRD == "" {
		errs = append(errs, errors.New("--crd is empty"))
	}
	if c.PageSize < 1 || c.PageSize > 10000 {
		errs = append(errs, fmt.Errorf("--page-size %d: want 1 to 10000", c.PageSize))
	}
	if err := c.logFlags.validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// apiConfig is the migrate client's configuration: the cluster flags', at the migrate
// command's rate (migrateQPS).
func (c migrateConfig) apiConfig(version string) (*rest.Config, error) {
	rc, err := c.restConfig(version)
	if err != nil {
		return nil, err
	}
	limitQPS(rc, migrateQPS, migrateBurst)
	return rc, nil
}

// migrateStorage runs the migration and, once it is done, prints what it did. A run that
// fails prints nothing of it, only the error: its figures would pass for a result (an
// unreachable cluster read as "0 rewritten"); the log has each page done and its continue
// token.
func migrateStorage(cc *cli.Context, c migrateConfig) error {
	log, err := c.logFlags.setUp(cc.App.ErrWriter)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cc.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rc, err := c.apiConfig(cc.App.Version)
	if err != nil {
		return err
	}
	cl, err := newAPIClients(rc)
	if err != nil {
		return err
	}
	m := &storageversion.Migrator{Client: cl.dynamic, CRD: c.CRD, PageSize: c.PageSize, Log: log}
	res, err := m.Run(ctx, c.Continue)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(cc.App.Writer, "storage version %s: %d rewritten, %d written by others meanwhile, %d deleted meanwhile, %d skipped as rewritten already (listed again after a continue token expired); storedVersions %v -> [%s]\n",
		res.StorageVersion, res.Rewritten, res.Conflicts, res.Gone, res.Skipped, res.StoredBefore, res.StorageVersion)
	return err
}
