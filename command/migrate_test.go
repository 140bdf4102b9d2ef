package command

import "testing"

func TestMigrateConfigValidate(t *testing.T) {
	tests := map[string]validateCase{
		"defaults":     {},
		"resumed":      {args: []string{"--crd", "x.y", "--page-size", "1", "--continue", "abc"}},
		"json logs":    {args: []string{"--log-format", "json", "--log-level", "debug"}},
		"no CRD":       {[]string{"--crd", ""}, "--crd", "--crd is empty"},
		"page too big": {[]string{"--page-size", "10001"}, "--page-size", "--page-size 10001: want 1 to 10000"},
		"both":         {[]string{"--crd", "", "--page-size", "0"}, "--page-size", "--crd is empty\n--page-size 0: want 1 to 10000"},
		"log format":   {[]string{"--log-format", "xml"}, "--log-format", `--log-format "xml": want text or json`},
	}
	checkValidate(t, tests, func(args []string) error {
		c := &migrateConfig{}
		parseFlags(t, migrateCommand(c), args...)
		return c.Validate()
	})
}
