// The plan command: what the controller would do for one VM, decided offline by the same
// code as the live reconcile.

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/reconcile"
	"github.com/cloudnative-czs/vm-controller/schema"
)

func planCommand() *cli.Command {
	return &cli.Command{
		Name:      "plan",
		Usage:     "print what the controller would do for a VM (a file, or - or nothing for stdin), without a cluster",
		ArgsUsage: "[VM-FILE]",
		Description: "Reads a VM as YAML or JSON and, with --server, the server the backend observes for it, and prints the\n" +
			"plan the controller would carry out: the finalizer change, the server action, the status and the exact\n" +
			"JSON merge patch sent to /status, the events and when it would look again. An empty plan ({}) means\n" +
			"there is nothing to do. A server the plan creates is made by the in-memory backend (ID mem-1).",
		OnUsageError: usageError,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "api-version", Usage: "group/version the VM is read as; empty: the VM's own apiVersion", EnvVars: env("API_VERSION")},
			schemaFileFlag(),
			&cli.StringFlag{Name: "server", Usage: "YAML file of the server the backend observes (name, id, state, detail, message, deleting, since, spec); empty: none"},
			&cli.StringFlag{Name: "now", Usage: "the time to decide at, RFC 3339 (2026-06-01T12:00:00Z); empty: now"},
			&cli.StringFlag{Name: "server-image", Value: reconcile.DefaultPolicy.DefaultImage, Usage: "container image of servers of VMs that name none", EnvVars: env("SERVER_IMAGE")},
			&cli.DurationFlag{Name: "restart-backoff", Value: reconcile.DefaultPolicy.RestartBackoff, Usage: "wait before replacing a failed server; doubles with each consecutive failure", EnvVars: env("RESTART_BACKOFF")},
			&cli.DurationFlag{Name: "max-restart-backoff", Value: reconcile.DefaultPolicy.MaxRestartBackoff, Usage: "longest wait before replacing a failed server", EnvVars: env("MAX_RESTART_BACKOFF")},
		},
		Action: planAction,
	}
}

// planOutput is the plan as printed. It is reconcile.Plan with the status written twice:
// as the VM's status, and as the exact patch the controller sends, at the paths of the
// field map.
type planOutput struct {
	Finalizer reconcile.FinalizerChange `yaml:"finalizer,omitempty"`
	Server    *reconcile.ServerAction   `yaml:"server,omitempty"`
	Status    *schema.Status            `yaml:"status,omitempty"`
	// StatusPatch is the JSON merge patch for /status. It carries the VM's resourceVersion
	// as a precondition, except after a finalizer is added: the controller then sends the
	// resourceVersion that write returned, which no offline plan can know.
	StatusPatch  string             `yaml:"statusPatch,omitempty"`
	Events       []reconcile.Event  `yaml:"events,omitempty"`
	RequeueAfter reconcile.Duration `yaml:"requeueAfter,omitempty"`
}

func planAction(c *cli.Context) error {
	usage := func(format string, args ...any) error { return cli.Exit(fmt.Sprintf(format, args...), 2) }
	if c.NArg() > 1 {
		return usage("plan takes one VM file, got %q (see --help)", c.Args().Slice())
	}
	now := time.Now()
	if s := c.String("now"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return usage("--now %q: want a time such as 2026-06-01T12:00:00Z", s)
		}
		now = t
	}
	policy := reconcile.Policy{DefaultImage: c.String("server-image"), RestartBackoff: c.Duration("restart-backoff"), MaxRestartBackoff: c.Duration("max-restart-backoff")}
	if policy.DefaultImage == "" {
		return usage("--server-image must not be empty")
	}
	if policy.RestartBackoff <= 0 || policy.MaxRestartBackoff < policy.RestartBackoff {
		return usage("--restart-backoff must be positive and at most --max-restart-backoff")
	}

	name, data, err := readInput(c)
	if err != nil {
		return err
	}
	raw, gv, err := decodeVM(data)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if s := c.String("api-version"); s != "" {
		want, err := k8sschema.ParseGroupVersion(s)
		if err != nil || want.Group == "" {
			return usage("--api-version %q: want group/version, such as %s", s, schema.DefaultAPIVersion)
		}
		if want != gv {
			return fmt.Errorf("%s: the VM is %s, not --api-version %s", name, gv, want)
		}
	}
	fields, err := loadFields(c, gv)
	if err != nil {
		return usage("%v", err)
	}
	vm, err := schema.Parse(raw, fields)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	var srv *backend.Server
	if file := c.String("server"); file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("read --server: %w", err)
		}
		if srv, err = memory.ParseServer(data, now); err != nil {
			return fmt.Errorf("--server %s: %w", file, err)
		}
	}

	out, err := makePlan(policy, vm, srv, now)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("render plan: %w", err)
	}
	_, err = c.App.Writer.Write(b.Bytes())
	return err
}

// makePlan decides as the controller does and completes the plan as its apply step would:
// a server it creates comes from the in-memory backend, and Plan.Created puts that server's
// identity into the status.
func makePlan(policy reconcile.Policy, vm schema.VirtualMachine, srv *backend.Server, now time.Time) (planOutput, error) {
	plan := policy.Decide(vm, srv, now)
	if plan.Server != nil && plan.Server.Op == reconcile.CreateServer {
		owner := backend.Owner{APIVersion: vm.APIVersion(), Kind: vm.Kind(), Namespace: vm.Namespace(), Name: vm.Name(), UID: vm.UID()}
		created, err := memory.New().Create(context.Background(), owner, *plan.Server.Spec)
		if err != nil {
			return planOutput{}, fmt.Errorf("create server: %w", err)
		}
		plan.Created(created)
	}
	out := planOutput{Finalizer: plan.Finalizer, Server: plan.Server, Status: plan.Status, Events: plan.Events, RequeueAfter: plan.RequeueAfter}
	if plan.Status != nil {
		rv := vm.ResourceVersion()
		if plan.Finalizer == reconcile.AddFinalizer {
			rv = ""
		}
		patch, err := schema.StatusPatch(vm.Fields(), *plan.Status, rv)
		if err != nil {
			return planOutput{}, fmt.Errorf("render status patch: %w", err)
		}
		out.StatusPatch = string(patch)
	}
	return out, nil
}

// readInput reads the VM from the file argument, or from stdin when there is none or it is -.
func readInput(c *cli.Context) (name string, data []byte, err error) {
	name = c.Args().First()
	if name == "" || name == "-" {
		data, err = io.ReadAll(c.App.Reader)
		if err != nil {
			return "", nil, fmt.Errorf("read stdin: %w", err)
		}
		return "stdin", data, nil
	}
	if data, err = os.ReadFile(name); err != nil {
		return "", nil, fmt.Errorf("read VM: %w", err)
	}
	return name, data, nil
}

// decodeVM turns one YAML or JSON document into the VM's JSON and reads its group/version.
func decodeVM(data []byte) ([]byte, k8sschema.GroupVersion, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	docs := 0
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, k8sschema.GroupVersion{}, fmt.Errorf("not valid YAML or JSON: %s", oneLine(err))
		}
		docs++
	}
	switch {
	case docs == 0:
		return nil, k8sschema.GroupVersion{}, errors.New("no VM: the input is empty")
	case docs > 1:
		return nil, k8sschema.GroupVersion{}, fmt.Errorf("%d YAML documents: want one VM", docs)
	}
	raw, err := sigsyaml.YAMLToJSON(data)
	if err != nil {
		return nil, k8sschema.GroupVersion{}, fmt.Errorf("not valid YAML or JSON: %s", oneLine(err))
	}
	vm, err := schema.Parse(raw, schema.Fields{})
	if err != nil {
		return nil, k8sschema.GroupVersion{}, fmt.Errorf("want a VM object: %w", err)
	}
	gv, err := k8sschema.ParseGroupVersion(vm.APIVersion())
	if err != nil || gv.Group == "" || gv.Version == "" {
		return nil, k8sschema.GroupVersion{}, fmt.Errorf("apiVersion %q: want group/version, such as %s", vm.APIVersion(), schema.DefaultAPIVersion)
	}
	if vm.Name() == "" {
		return nil, k8sschema.GroupVersion{}, errors.New("the VM has no metadata.name")
	}
	return raw, gv, nil
}

// oneLine keeps a parser's error on one line.
func oneLine(err error) string {
	return strings.ReplaceAll(strings.TrimPrefix(err.Error(), "yaml: "), "\n", " ")
}
