// Package command is vm-controller's command line (urfave/cli/v2): one file per command (run,
// check, plan, manifests, crds, webhook, migrate), each in the same shape, and what they
// share.
//
// Every command is built by xCommand(&xConfig{}) from App. Its flags fill one typed
// configuration through Destination, each with a VMC_ environment variable; its Validate
// method checks the configuration before anything runs (a table test each); action runs
// them in that order and makes a bad argument or flag one line and exit code 2. A flag that
// several commands take is built once, by a function in flags.go (log.go for --log-level and
// --log-format, which every command that logs takes; clients.go for --kubeconfig and
// --context), so that its name, variable and default cannot drift apart, and
// docs/reference/flags.md is generated from these declarations (flags_doc_test.go).
//
// run and check start the same way: clients.go builds the REST configs and clients, and
// facts.go reads what the cluster says about the resource (its CRD, read once; the field map
// its schema chooses; RBAC) into one value that check prints and run starts from.
package command
