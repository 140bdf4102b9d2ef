// Package pods realises each VirtualMachine's server as a Pod in the VM's namespace. It works on
// any cluster: nothing beyond the core API is needed.
//
//   - The pod's name is derived from the VM's name alone, so a retry, a restarted controller or a
//     second replica can never make a second pod for one VM.
//   - The VM controls the pod (ownerReference with controller: true), so the garbage collector
//     removes it even if the controller is gone, and a label with the VM's UID selects it.
//   - One container runs the server image with requests equal to limits for cpu and memory
//     (Guaranteed QoS). With Config.Disks it mounts the VM's disk, a PersistentVolumeClaim the
//     VM owns that outlives every pod (disks.go, claim.go); without, ephemeral-storage is set
//     to the VM's rootDisk and goes with the pod.
//   - No securityContext by default: the image runs as it says. With Config.PodSecurity
//     restricted, the one the restricted Pod Security Standard asks for (security.go), which
//     no running server is replaced for.
//   - restartPolicy is Never: a failed server shows as a Failed pod, which the controller
//     replaces with a backoff, instead of being restarted in place by the kubelet unseen.
//
// The pods backend is where Pod phases end: it translates each pod into a backend.State (Pending,
// Starting, Ready, Failed, Stopped, Lost) and keeps the phase only as the Server's Detail, the
// word the status repeats; the decision (package reconcile/decision) never sees a Pod. A server
// whose container has terminated has ended, whatever the phase of a pod that another container
// keeps running (phaseOf).
//
// An informer on the labelled pods, which reads each pod off the protobuf watch stream into a
// compact cached form (wire.go, cached.go), and optionally one on nodes to tell a lost node,
// notify the controller of every change to a VM's server; with Config.Disks, informers on the
// labelled claims, the StorageClasses and the Events on claims, of every change to its disk.
package pods
