// The manifests command: everything to deploy vm-controller, printed for the flags given.

package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cloudnative-czs/vm-controller/crds"
	"github.com/cloudnative-czs/vm-controller/deploy"
	"github.com/cloudnative-czs/vm-controller/schema"
)

func manifestsCommand() *cli.Command {
	return &cli.Command{
		Name:  "manifests",
		Usage: "print the CRD, ServiceAccount, RBAC and Deployment to run vm-controller in a cluster (vm-controller manifests | kubectl apply -f -)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "api-version", Value: schema.DefaultAPIVersion, Usage: "group/version of the VirtualMachine resource"},
			&cli.StringFlag{Name: "resource", Value: schema.DefaultResource, Usage: "plural resource name of the VirtualMachine resource"},
			&cli.StringFlag{Name: "namespace", Value: deploy.Name, Usage: "namespace the controller runs in (created unless default or kube-system)"},
			&cli.StringFlag{Name: "watch-namespace", Usage: "manage VMs in this namespace only, with namespace-scoped RBAC; empty: all namespaces"},
			&cli.StringFlag{Name: "image", Value: "vm-controller:" + imageTag(), Usage: "the controller's container image"},
			&cli.IntFlag{Name: "replicas", Value: 2, Usage: "replicas; one leads, the others stand by"},
			&cli.BoolFlag{Name: "watch-nodes", Value: true, Usage: "grant read access to nodes and run with --watch-nodes (lost nodes show as Unknown)"},
			&cli.BoolFlag{Name: "usage", Value: true, Usage: "grant read access to metrics.k8s.io pods and sample usage (run's --usage-interval); false: --usage-interval=0"},
			&cli.BoolFlag{Name: "watch-crd", Value: true, Usage: "grant read access to the resource's CRD and run with --watch-crd (follows the CRD's deletion and return)"},
			&cli.StringFlag{Name: "server-image", Usage: "passed to run as --server-image; empty: run's default"},
			&cli.StringFlag{Name: "schema-file", Usage: "field-map file to ship in a ConfigMap and run with (--schema-file); empty: the built-in map of --api-version"},
		},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cli.Exit(fmt.Sprintf("manifests takes no arguments, got %q (see --help)", c.Args().Slice()), 2)
			}
			gvr, err := schema.ParseGVR(c.String("api-version"), c.String("resource"))
			if err != nil {
				return cli.Exit(err.Error(), 2)
			}
			for _, f := range []string{"namespace", "watch-namespace"} {
				if v := c.String(f); v != "" {
					if errs := validation.IsDNS1123Label(v); len(errs) > 0 {
						return cli.Exit(fmt.Sprintf("--%s %q: %s", f, v, strings.Join(errs, "; ")), 2)
					}
				}
			}
			if c.Int("replicas") < 1 {
				return cli.Exit(fmt.Sprintf("--replicas must be at least 1, got %d", c.Int("replicas")), 2)
			}
			o := deploy.Options{GVR: gvr, Namespace: c.String("namespace"), WatchNamespace: c.String("watch-namespace"),
				Image: c.String("image"), Replicas: int32(c.Int("replicas")), WatchNodes: c.Bool("watch-nodes"), WatchCRD: c.Bool("watch-crd"), Usage: c.Bool("usage")}
			if img := c.String("server-image"); img != "" {
				o.Args = append(o.Args, "--server-image="+img)
			}
			if file := c.String("schema-file"); file != "" {
				// Validated as run would, so a broken map fails here and not in the cluster.
				if _, err := schema.LoadFieldMap(file); err != nil {
					return cli.Exit(err.Error(), 2)
				}
				if o.FieldMap, err = os.ReadFile(file); err != nil {
					return cli.Exit(err.Error(), 2)
				}
			}
			// The CRD ships only for this project's own group; another group brings its own.
			if gvr.Group == "cloudnative.czs" {
				if o.CRD, err = crds.YAML(); err != nil {
					return fmt.Errorf("read embedded CRDs: %w", err)
				}
			}
			out, err := deploy.Render(o)
			if err != nil {
				return err
			}
			_, err = os.Stdout.Write(out)
			return err
		},
	}
}

// imageTag is the image tag matching this build: its version, or latest for a development
// build.
func imageTag() string {
	v := buildVersion()
	if v == "(devel)" || v == "" {
		return "latest"
	}
	return v
}
