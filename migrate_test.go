package main

import "testing"

func TestMigrateConfigValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  migrateConfig
		want string
	}{
		"defaults":     {migrateConfig{CRD: "virtualmachines.cloudnative.czs", PageSize: 500}, ""},
		"resumed":      {migrateConfig{CRD: "x.y", PageSize: 1, Continue: "abc"}, ""},
		"no CRD":       {migrateConfig{PageSize: 500}, "--crd is empty"},
		"page too big": {migrateConfig{CRD: "x.y", PageSize: 10001}, "--page-size 10001: want 1 to 10000"},
		"both":         {migrateConfig{PageSize: 0}, "--crd is empty\n--page-size 0: want 1 to 10000"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := errString(tc.cfg.Validate()); got != tc.want {
				t.Errorf("error %q, want %q", got, tc.want)
			}
		})
	}
}
