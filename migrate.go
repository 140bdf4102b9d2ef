package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	"k8s.io/client-go/dynamic"

	"github.com/cloudnative-czs/vm-controller/crds"
	"github.com/cloudnative-czs/vm-controller/migrate"
)

// migrateConfig is the configuration of `vm-controller migrate`.
type migrateConfig struct {
	clusterFlags
	CRD      string
	PageSize int64
	Continue string
}

// Validate refuses an empty CRD name and a page size the API server would not honour.
func (c *migrateConfig) Validate() error {
	var errs []error
	if c.CRD == "" {
		errs = append(errs, errors.New("--crd is empty"))
	}
	if c.PageSize < 1 || c.PageSize > 10000 {
		errs = append(errs, fmt.Errorf("--page-size %d: want 1 to 10000", c.PageSize))
	}
	return errors.Join(errs...)
}

func migrateCommand() *cli.Command {
	var cfg migrateConfig
	return &cli.Command{
		Name:  "migrate",
		Usage: "rewrite every VirtualMachine in the CRD's storage version, then trim status.storedVersions (safe to run again)",
		Flags: append(cfg.flags(), []cli.Flag{
			&cli.StringFlag{Name: "crd", Value: crds.DefaultName, Usage: "the CRD whose objects to migrate", Destination: &cfg.CRD},
			&cli.Int64Flag{Name: "page-size", Value: 500, Usage: "objects per list page", Destination: &cfg.PageSize},
			&cli.StringFlag{Name: "continue", Usage: "resume from this continue token (the last one a run logged); empty: from the start", Destination: &cfg.Continue},
		}...),
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if err := cfg.Validate(); err != nil {
				return cli.Exit(strings.ReplaceAll(err.Error(), "\n", "; ")+" (see --help)", 2)
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			rc, err := cfg.restConfig()
			if err != nil {
				return err
			}
			dyn, err := dynamic.NewForConfig(rc)
			if err != nil {
				return fmt.Errorf("make client: %w", err)
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, nil))
			m := &migrate.Migrator{Client: dyn, CRD: cfg.CRD, PageSize: cfg.PageSize, Log: log}
			res, err := m.Run(ctx, cfg.Continue)
			fmt.Printf("storage version %s: %d rewritten, %d written by others meanwhile, %d deleted meanwhile; storedVersions %v -> ",
				res.StorageVersion, res.Rewritten, res.Conflicts, res.Gone, res.StoredBefore)
			if err != nil {
				fmt.Println("unchanged")
				return err
			}
			fmt.Printf("[%s]\n", res.StorageVersion)
			return nil
		},
	}
}
