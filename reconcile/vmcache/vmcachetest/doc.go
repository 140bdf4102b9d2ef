// Package vmcachetest serves VMs as the API server does, for the tests and benchmarks of the
// VM cache's ListerWatcher (reconcile/vmcache) and of the loop that runs it (reconcile): an
// HTTP handler speaking the list and watch JSON of one namespace's VMs, and a VM with the
// managedFields a watch event carries.
//
// Why a package: both packages' tests run client-go's informer over the real JSON, the
// loop's cold-start benchmark included; one fake of the API server keeps them speaking the
// same JSON.
package vmcachetest
