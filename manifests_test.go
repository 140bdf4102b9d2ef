package main

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestManifestsConversion: --conversion webhook renders this project's CRD with v1, so it
// refuses another group; v1 is only served by that form.
func TestManifestsConversion(t *testing.T) {
	tests := map[string]validateCase{
		"webhook":            {args: []string{"--conversion", "webhook"}},
		"webhook on v1":      {args: []string{"--conversion", "webhook", "--api-version", "cloudnative.czs/v1"}},
		"v1 without webhook": {[]string{"--api-version", "cloudnative.czs/v1"}, "--conversion", "--api-version cloudnative.czs/v1 needs --conversion webhook: the plain CRD does not serve v1"},
		"another group":      {[]string{"--conversion", "webhook", "--api-version", "compute.example.org/v1"}, "--conversion", "--conversion webhook renders the CRD of cloudnative.czs; the CRD of compute.example.org is its owner's to ship"},
		"no webhook replica": {[]string{"--conversion", "webhook", "--webhook-replicas", "0"}, "--webhook-replicas", "--webhook-replicas must be at least 1, got 0"},
		"unknown":            {[]string{"--conversion", "Webhook"}, "--conversion", `--conversion "Webhook": want none or webhook`},
	}
	checkValidate(t, tests, func(args []string) error {
		c := &manifestsConfig{}
		parseFlags(t, manifestsCommand(c), args...)
		return c.Validate()
	})
}

// tagSyntax is the grammar of an image tag (the OCI distribution spec's).
var tagSyntax = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// TestImageTagOf: every case of testdata/image-tags.txt, which tools/image's TestTag reads too,
// so that `make image` and the default --image agree on the tag of a build.
func TestImageTagOf(t *testing.T) {
	f, err := os.Open("testdata/image-tags.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cases := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 4 || (fields[2] != "true" && fields[2] != "false") {
			t.Fatalf("testdata/image-tags.txt: %q: want version revision modified tag", line)
		}
		none := func(s string) string {
			if s == "-" {
				return ""
			}
			return s
		}
		version, revision, modified, want := none(fields[0]), none(fields[1]), fields[2] == "true", fields[3]
		if got := imageTagOf(version, revision, modified); got != want {
			t.Errorf("imageTagOf(%q, %q, %v) = %q, want %q", version, revision, modified, got, want)
		}
		if !tagSyntax.MatchString(want) {
			t.Errorf("%q is no image tag", want)
		}
		cases++
	}
	if cases == 0 {
		t.Fatal("testdata/image-tags.txt holds no case")
	}
}
