// The ceiling scenario: the API writes that take one VM from created to Active, made by a raw
// client with nothing in between, so that the controller's convergence can be read as a ratio
// to what this machine's API server allows at all.

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cloudnative-czs/vm-controller/bench/record"
	"github.com/cloudnative-czs/vm-controller/schema"
)

func ceilingScenario(args []string) error {
	fs := flag.NewFlagSet("ceiling", flag.ExitOnError)
	n := fs.Int("vms", 1000, "VMs to take through the writes")
	c := fs.Int("concurrency", 32, "VMs in flight")
	events := fs.Bool("events", false, "also write the three Events the cluster records per VM (10 writes per VM)")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig; empty: $KUBECONFIG or the checkout's .cache/kubeconfig")
	resultsDir := resultsFlag(fs)
	_ = fs.Parse(args)
	rec := newRecording("ceiling", fs, args, *resultsDir)
	e, err := setup(*kubeconfig)
	if err != nil {
		return err
	}
	defer e.close()
	rec.add("raw client", false, record.Repetition{Rep: 1, Started: time.Now()})
	took, err := ceiling(e, *n, *c, *events)
	if err != nil {
		return err
	}
	rec.figure("all writes made", took.Seconds(), "s")
	rec.figure("VMs/s", float64(*n)/took.Seconds(), "VMs/s")
	return rec.finish()
}

// ceilingNode is where the ceiling's pods are bound: a node that does not exist, so that
// neither kwok nor a kubelet writes to them (the pod garbage collector deletes pods of a
// missing node after 40 s, so a long ceiling shares the API server with those deletes).
const ceilingNode = "bench-ceiling-absent-node"

// ceiling makes, for n VMs with c in flight, the seven writes the cluster makes for one VM to
// become Active: create the VM, patch its metadata (the finalizer's write), create its pod,
// bind the pod, patch the pod's status to Running and Ready, and write the VM's status
// Creating, then Active. With events, it also creates the three Events the cluster records
// for a VM on the way (the controller's CreatingServer and ServerReady, the scheduler's
// Scheduled), each where the cluster records it. It runs in a namespace of its own, which it
// deletes (and waits for) before it returns the time taken.
func ceiling(e *env, n, c int, events bool) (time.Duration, error) {
	ctx := context.Background()
	ns, writes := e.ns+"-ceiling", 7
	if events {
		ns, writes = e.ns+"-ceiling-events", 10
	}
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return 0, fmt.Errorf("create namespace: %w", err)
	}
	defer func() {
		// The next stage (or run) should not share the API server with this one's objects.
		start := time.Now()
		if err := e.kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil {
			return
		}
		for time.Since(start) < 15*time.Minute {
			if _, err := e.kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				fmt.Printf("  namespace %s removed in %s\n", ns, time.Since(start).Round(time.Second))
				return
			}
			time.Sleep(2 * time.Second)
		}
	}()
	record := func(regarding corev1.ObjectReference, controller, reason, action, note string) error {
		if !events {
			return nil
		}
		now := metav1.NowMicro()
		_, err := e.kube.EventsV1().Events(ns).Create(ctx, &eventsv1.Event{
			// Named as client-go's recorder names events: the object's name and the time.
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", regarding.Name, now.UnixNano())}, EventTime: now,
			ReportingController: controller, ReportingInstance: controller + "-bench", Action: action, Reason: reason,
			Regarding: regarding, Note: note, Type: corev1.EventTypeNormal,
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create event: %w", err)
		}
		return nil
	}
	fields, err := schema.ForVersion(k8sschema.GroupVersion{Group: vmGVR.Group, Version: vmGVR.Version})
	if err != nil {
		return 0, err
	}
	vms, pods := e.dyn.Resource(vmGVR).Namespace(ns), e.kube.CoreV1().Pods(ns)
	before, err := e.apiserverMetrics()
	if err != nil {
		return 0, err
	}
	cpuBefore := takeCPU()
	start := time.Now()
	err = parallel(n, c, func(i int) error {
		vm, err := vms.Create(ctx, newVM(i), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create VM: %w", err)
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{"bench": "ceiling"}, "resourceVersion": vm.GetResourceVersion()}})
		if vm, err = vms.Patch(ctx, vm.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("patch VM: %w", err)
		}
		pod, err := pods.Create(ctx, ceilingPod(vm.GetName(), vm.GetUID()), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create pod: %w", err)
		}
		vmRef := corev1.ObjectReference{APIVersion: vmGVR.GroupVersion().String(), Kind: "VirtualMachine", Namespace: ns, Name: vm.GetName(), UID: vm.GetUID()}
		if err := record(vmRef, "vm-controller", "CreatingServer", "CreateServer", "Creating server "+pod.Name); err != nil {
			return err
		}
		if err := pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name},
			Target: corev1.ObjectReference{Kind: "Node", Name: ceilingNode}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("bind pod: %w", err)
		}
		podRef := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: pod.Name, UID: pod.UID}
		if err := record(podRef, "default-scheduler", "Scheduled", "Binding", "Successfully assigned "+ns+"/"+pod.Name+" to "+ceilingNode); err != nil {
			return err
		}
		now := metav1.Now()
		podStatus, _ := json.Marshal(map[string]any{"status": corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", HostIP: "10.0.0.2", StartTime: &now,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "server", Ready: true, Image: "registry.k8s.io/pause:3.10",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}}})
		if _, err := pods.Patch(ctx, pod.Name, types.MergePatchType, podStatus, metav1.PatchOptions{}, "status"); err != nil {
			return fmt.Errorf("patch pod status: %w", err)
		}
		rv := vm.GetResourceVersion()
		for _, st := range []schema.Status{ceilingStatus(schema.PhaseCreating, "ServerCreating", pod), ceilingStatus(schema.PhaseActive, "ServerReady", pod)} {
			p, err := schema.StatusPatch(fields, st, rv)
			if err != nil {
				return err
			}
			out, err := vms.Patch(ctx, vm.GetName(), types.MergePatchType, p, metav1.PatchOptions{}, "status")
			if err != nil {
				return fmt.Errorf("patch VM status: %w", err)
			}
			rv = out.GetResourceVersion()
		}
		return record(vmRef, "vm-controller", "ServerReady", "UpdateStatus", "Server "+pod.Name+" is running and ready")
	})
	took := time.Since(start)
	cpuAfter := takeCPU()
	if err != nil {
		return 0, err
	}
	fmt.Printf("ceiling: %d VMs x %d writes with %d VMs in flight in %s: %.0f VMs/s, %.0f writes/s\n",
		n, writes, c, took.Round(time.Millisecond), float64(n)/took.Seconds(), float64(writes*n)/took.Seconds())
	if after, err := e.apiserverMetrics(); err == nil {
		printClusterWrites(before, after, float64(n))
	}
	printCPU("  CPU by process", cpuBefore, cpuAfter)
	return took, nil
}

// ceilingPod is the pod the controller would make for the VM, left to no scheduler.
func ceilingPod(vm string, uid types.UID) *corev1.Pod {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Mi")}
	yes, no := true, false
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: vm + "-server", Labels: map[string]string{"bench": "ceiling", "cloudnative.czs/vm": vm},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: vmGVR.GroupVersion().String(), Kind: "VirtualMachine", Name: vm, UID: uid,
				Controller: &yes, BlockOwnerDeletion: &yes}}},
		Spec: corev1.PodSpec{
			SchedulerName: "bench-no-scheduler",
			Containers: []corev1.Container{{Name: "server", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: res, Limits: res.DeepCopy()}}},
			RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: &no, EnableServiceLinks: &no,
		},
	}
}

func ceilingStatus(phase schema.Phase, reason string, pod *corev1.Pod) schema.Status {
	now := time.Now().UTC().Truncate(time.Second)
	msg := "Server " + pod.Name + " is running and ready"
	status := schema.ConditionTrue
	if phase != schema.PhaseActive {
		msg, status = "Waiting for the server to start", schema.ConditionFalse
	}
	return schema.Status{Phase: phase, Reason: reason, Message: msg, ObservedGeneration: 1, LastUpdateTime: now,
		Server:     &schema.ServerStatus{Name: pod.Name, ID: string(pod.UID), State: "Running"},
		Conditions: []schema.Condition{{Type: schema.ConditionReady, Status: status, ObservedGeneration: 1, LastTransitionTime: now, Reason: reason, Message: msg}}}
}
