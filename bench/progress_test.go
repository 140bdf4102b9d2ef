package main

import "testing"

// TestParseRSS: a process's name and resident memory are read from its status; a kernel
// thread (no VmRSS) and a status without a name are left out.
func TestParseRSS(t *testing.T) {
	tests := []struct {
		name, status string
		wantName     string
		wantMB       float64
		wantOK       bool
	}{
		{"process", "Name:\tkube-apiserver\nUmask:\t0022\nVmHWM:\t 12000000 kB\nVmRSS:\t 9765625 kB\nThreads:\t30\n", "kube-apiserver", 10000, true},
		{"kernel thread", "Name:\tkworker/0:1\nUmask:\t0000\nThreads:\t1\n", "", 0, false},
		{"no name", "VmRSS:\t 100 kB\n", "", 0, false},
		{"bad size", "Name:\tkwok\nVmRSS:\t lots kB\n", "", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name, mb, ok := parseRSS(tc.status)
			if ok != tc.wantOK || ok && (name != tc.wantName || mb != tc.wantMB) {
				t.Errorf("parseRSS = %q, %v MB, %v; want %q, %v MB, %v", name, mb, ok, tc.wantName, tc.wantMB, tc.wantOK)
			}
		})
	}
}
