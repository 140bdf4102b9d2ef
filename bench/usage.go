// The usage scenario: the API cost of sampling usage at N Active VMs.

package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cloudnative-czs/vm-controller/bench/record"
)

// countUsage counts the VMs that report usage.
func (e *env) countUsage() int {
	list, err := e.dyn.Resource(vmGVR).Namespace(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return 0
	}
	n := 0
	for _, vm := range list.Items {
		if _, ok, _ := unstructured.NestedString(vm.Object, "status", "server", "usage", "cpu"); ok {
			n++
		}
	}
	return n
}

func usageScenario(args []string) error {
	fs := flag.NewFlagSet("usage", flag.ExitOnError)
	n := fs.Int("vms", 1000, "Active VMs")
	interval := fs.Duration("interval", time.Minute, "the controller's --usage-interval")
	window := fs.Duration("window", 2*time.Minute, "how long requests are counted, once every VM reports usage")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig; empty: $KUBECONFIG or the checkout's .cache/kubeconfig")
	resultsDir := resultsFlag(fs)
	_ = fs.Parse(args)
	rec := newRecording("usage", fs, args, *resultsDir)

	e, err := setup(*kubeconfig)
	if err != nil {
		return err
	}
	defer e.close()
	c, err := e.startController("--usage-interval", interval.String(), "--workers", "8")
	if err != nil {
		return err
	}
	if err := e.createVMs(*n, 32); err != nil {
		return fmt.Errorf("create VMs: %w", err)
	}
	took, err := e.waitActive(*n, 10*time.Minute)
	if err != nil {
		return err
	}
	fmt.Printf("%d VMs Active after %s\n", *n, took.Round(time.Second))
	rec.add("vm-controller", false, record.Repetition{Rep: 1, Started: time.Now()})
	rec.figure("all Active after the first create", took.Seconds(), "s")
	start := time.Now()
	for e.countUsage() < *n {
		if time.Since(start) > 10*time.Minute {
			return fmt.Errorf("only %d of %d VMs report usage after 10m", e.countUsage(), *n)
		}
		time.Sleep(5 * time.Second)
	}
	fmt.Printf("all report usage %s later\n", time.Since(start).Round(time.Second))
	rec.figure("all report usage, after all Active", time.Since(start).Seconds(), "s")

	before, err := c.scrape()
	if err != nil {
		return err
	}
	time.Sleep(*window)
	after, err := c.scrape()
	if err != nil {
		return err
	}
	minutes := window.Minutes()
	d := func(parts ...string) float64 { return sum(after, parts...) - sum(before, parts...) }
	gets, patches := d("rest_client_requests_total", `method="GET"`), d("rest_client_requests_total", `method="PATCH"`)
	other := d("rest_client_requests_total") - gets - patches
	fmt.Printf("usage sampling at %d Active VMs, --usage-interval %s, over %s:\n", *n, interval, window)
	fmt.Printf("  GET   %7.0f/min  (%.2f per VM per min; expected %.2f)\n", gets/minutes, gets/minutes/float64(*n), time.Minute.Seconds()/interval.Seconds())
	fmt.Printf("  PATCH %7.0f/min  (%.3f per VM per min: usage writes past the threshold or max interval)\n", patches/minutes, patches/minutes/float64(*n))
	fmt.Printf("  other %7.0f/min\n", other/minutes)
	fmt.Printf("  reconciles %.0f (usage writes must cause none)\n", d("vmcontroller_reconcile_total"))
	rec.figure("GET per VM per minute", gets/minutes/float64(*n), "requests")
	rec.figure("PATCH per VM per minute", patches/minutes/float64(*n), "requests")
	rec.figure("other requests per minute", other/minutes, "requests")
	rec.figure("reconciles in the window", d("vmcontroller_reconcile_total"), "reconciles")
	return rec.finish()
}
