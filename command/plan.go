// The plan command: what the controller would do for one VM, decided offline by the same
// code as the live reconcile.

package command

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
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// planConfig is the plan command's configuration.
type planConfig struct {
	policyFlags
	rootDiskFlags
	APIVersion string
	SchemaFile string
	Server     string
	Disk       string
	Budget     string
	Now        string
}

// planCommand is the plan command. The keys --server, --disk and --budget list are those
// their parsers accept (package memory), in the order of their errors for an unknown key;
// TestPlanFileKeys holds the two to each other.
func planCommand(c *planConfig) *cli.Command {
	flags := []cli.Flag{
		planAPIVersionFlag(&c.APIVersion),
		schemaFileFlag(&c.SchemaFile, schemaFileUsage),
		&cli.StringFlag{Name: "server", Usage: "YAML file of the server the backend observes (name, id, state, detail, message, deleting, since, spec, resize, disk, node, nodeGone, nodeSilent, ip, waiting, cordoned, disruption, lingers, admittedTolerations, tolerationsChanged); empty: none", EnvVars: env("SERVER"), Destination: &c.Server},
		&cli.StringFlag{Name: "disk", Usage: "YAML file of the VM's disk the backend observes (name, id, version, phase, requested, capacity, storageClass, canGrow, bindsWithServer, growth, owner, keptMark, kindUnrecorded, pending, deleting, pinned, nodeAffinity); under --root-disk ephemeral, one left from claim, kept or deleted only; empty: none", EnvVars: env("DISK"), Destination: &c.Disk},
		&cli.StringFlag{Name: "budget", Usage: "YAML file of the VM's disruption budget the backend observes (name, id, unowned, kindUnrecorded; the eviction strategy Block keeps one); empty: none", EnvVars: env("BUDGET"), Destination: &c.Budget},
		&cli.StringFlag{Name: "now", Usage: "the time to decide at, RFC 3339 (2026-06-01T12:00:00Z); empty: now", EnvVars: env("NOW"), Destination: &c.Now},
	}
	flags = append(flags, serverImageFlag(&c.ServerImage, "container image of servers of VMs that name none"))
	flags = append(flags, c.backoffFlags()...)
	flags = append(flags, c.stalledAfterFlag())
	flags = append(flags, c.evictionStrategyFlag())
	flags = append(flags, c.rootDiskFlag(rootDiskUsage))
	return &cli.Command{
		Name:      "plan",
		Usage:     "print what the controller would do for a VM (a file, or - or nothing for stdin), without a cluster",
		ArgsUsage: "[VM-FILE]",
		Description: "Reads a VM as YAML or JSON and, with --server, --disk and --budget, the server, the disk and the\n" +
			"disruption budget the backend observes for it, and prints the plan the controller would carry out: the\n" +
			"finalizer change, the disk, server and budget actions, the status and the exact JSON merge patch sent to\n" +
			"/status, the events and when it would look again. An empty plan ({}) means there is nothing to do. A server,\n" +
			"disk or budget the plan creates is made by the in-memory backend (ID mem-1, disk-1; budget NAME-block-eviction).",
		OnUsageError: usageError,
		Flags:        flags,
		Action:       action(c, oneFile, func(cc *cli.Context) error { return printPlan(cc, *c) }),
	}
}

// planAPIVersionFlag is plan's --api-version: the version the VM file must be of, by default
// its own. It reads no environment variable: VMC_API_VERSION is the version the controller
// watches (run's --api-version), which the API server converts every VM to, and a file is
// not converted; set for the controller, it would make plan refuse every VM file of
// another version.
func planAPIVersionFlag(dst *string) cli.Flag {
	return &cli.StringFlag{Name: "api-version", Usage: "group/version the VM is read as; empty: the VM's own apiVersion. Unlike run's, it reads no VMC_API_VERSION", Destination: dst}
}

// oneFile refuses more than the one VM file plan reads, as a usage error.
func oneFile(c *cli.Context) error {
	if c.NArg() > 1 {
		return cli.Exit(fmt.Sprintf("plan takes one VM file, got %q (see --help)", c.Args().Slice()), 2)
	}
	return nil
}

// Validate checks the flags that can be checked without reading a file; each error names
// the flag.
func (c planConfig) Validate() error {
	if _, err := c.now(); err != nil {
		return err
	}
	if err := c.policyFlags.validate(); err != nil {
		return err
	}
	if err := c.rootDiskFlags.validate(); err != nil {
		return err
	}
	_, err := c.groupVersion()
	return err
}

// now is the time to decide at: --now, else the clock's.
func (c planConfig) now() (time.Time, error) {
	if c.Now == "" {
		return time.Now(), nil
	}
	t, err := time.Parse(time.RFC3339, c.Now)
	if err != nil {
		return time.Time{}, fmt.Errorf("--now %q: want a time such as 2026-06-01T12:00:00Z", c.Now)
	}
	return t, nil
}

// groupVersion is --api-version, or the empty GroupVersion when it is not set.
func (c planConfig) groupVersion() (k8sschema.GroupVersion, error) {
	if c.APIVersion == "" {
		return k8sschema.GroupVersion{}, nil
	}
	gv, err := k8sschema.ParseGroupVersion(c.APIVersion)
	if err != nil || gv.Group == "" {
		return k8sschema.GroupVersion{}, fmt.Errorf("--api-version %q: want group/version, such as %s", c.APIVersion, schema.DefaultAPIVersion)
	}
	return gv, nil
}

// planOutput is the plan as printed. It is decision.Plan with the status written twice:
// as the VM's status, and as the exact patch the controller sends, at the paths of the
// field map.
type planOutput struct {
	Finalizer decision.FinalizerChange `yaml:"finalizer,omitempty"`
	Disk      *decision.DiskAction     `yaml:"disk,omitempty"`
	Server    *decision.ServerAction   `yaml:"server,omitempty"`
	Budget    *decision.BudgetAction   `yaml:"budget,omitempty"`
	// BudgetName is the name of the budget a plan creates, as the in-memory backend names it.
	BudgetName string         `yaml:"budgetName,omitempty"`
	Status     *schema.Status `yaml:"status,omitempty"`
	// StatusPatch is the JSON merge patch for /status. It carries the VM's resourceVersion
	// as a precondition, except after a finalizer is added: the controller then sends the
	// resourceVersion that write returned, which no offline plan can know.
	StatusPatch  string            `yaml:"statusPatch,omitempty"`
	Events       []decision.Event  `yaml:"events,omitempty"`
	RequeueAfter decision.Duration `yaml:"requeueAfter,omitempty"`
}

// printPlan decides for the VM read and prints the plan.
func printPlan(cc *cli.Context, c planConfig) error {
	now, err := c.now()
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	want, err := c.groupVersion()
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	name, data, err := readInput(cc)
	if err != nil {
		return err
	}
	raw, gv, err := decodeVM(data)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if !want.Empty() && want != gv {
		return fmt.Errorf("%s: the VM is %s, not --api-version %s", name, gv, want)
	}
	fields, err := loadFields(c.SchemaFile, gv)
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	vm, err := schema.Parse(raw, fields)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	var srv *backend.Server
	if file := c.Server; file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("read --server: %w", err)
		}
		if srv, err = memory.ParseServer(data, now); err != nil {
			return fmt.Errorf("--server %s: %w", file, err)
		}
	}
	var disk *backend.Disk
	if file := c.Disk; file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("read --disk: %w", err)
		}
		if disk, err = memory.ParseDisk(data); err != nil {
			return fmt.Errorf("--disk %s: %w", file, err)
		}
	}

	var budget *backend.Budget
	if file := c.Budget; file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("read --budget: %w", err)
		}
		if budget, err = memory.ParseBudget(data); err != nil {
			return fmt.Errorf("--budget %s: %w", file, err)
		}
	}

	out, err := makePlan(c.policy(c.rootDiskFlags), vm, srv, disk, budget, now)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("render plan: %w", err)
	}
	_, err = cc.App.Writer.Write(b.Bytes())
	return err
}

// makePlan decides as the controller does and completes the plan as its apply step would:
// a disk or a server it creates comes from the in-memory backend, and Plan.CreatedDisk and
// Plan.Created put their names into the status.
func makePlan(policy decision.Policy, vm schema.VirtualMachine, srv *backend.Server, disk *backend.Disk, budget *backend.Budget, now time.Time) (planOutput, error) {
	plan := policy.Decide(decision.Input{VM: vm, Server: srv, Disk: disk, Budget: budget, Now: now})
	owner := backend.Owner{APIVersion: vm.APIVersion(), Kind: vm.Kind(), Namespace: vm.Namespace(), Name: vm.Name(), UID: vm.UID()}
	made := memory.New()
	if plan.Disk != nil && plan.Disk.Op == decision.CreateDisk {
		created, err := made.CreateDisk(context.Background(), owner, *plan.Disk.Spec)
		if err != nil {
			return planOutput{}, fmt.Errorf("create disk: %w", err)
		}
		plan.CreatedDisk(created)
	}
	if plan.Server != nil && plan.Server.Op == decision.CreateServer {
		created, err := made.Create(context.Background(), owner, *plan.Server.Spec)
		if err != nil {
			return planOutput{}, fmt.Errorf("create server: %w", err)
		}
		plan.Created(created)
	}
	out := planOutput{Finalizer: plan.Finalizer, Disk: plan.Disk, Server: plan.Server, Budget: plan.Budget, Status: plan.Status, Events: plan.Events, RequeueAfter: plan.RequeueAfter}
	if plan.Budget != nil && plan.Budget.Op == decision.CreateBudget {
		made, err := made.CreateBudget(context.Background(), owner)
		if err != nil {
			return planOutput{}, fmt.Errorf("create budget: %w", err)
		}
		out.BudgetName = made.Name
	}
	if plan.Status != nil {
		rv := vm.ResourceVersion()
		if plan.Finalizer == decision.AddFinalizer {
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
