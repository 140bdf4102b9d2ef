// The crds command: the CustomResourceDefinition, printed.

package command

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/cloudnative-czs/vm-controller/crds"
)

// crdsConfig is the crds command's configuration.
type crdsConfig struct {
	Conversion     string // none or webhook
	Namespace      string // of the webhook's Service
	StorageVersion string
}

// crdsCommand prints the CRD. The default is the plain form (conversion None, no v1), so that
// `vm-controller crds | kubectl apply -f -` never makes every read depend on a webhook that is
// not running; --conversion webhook prints the form with v1 (docs/versions.md).
func crdsCommand(c *crdsConfig) *cli.Command {
	return &cli.Command{
		Name:  "crds",
		Usage: "print the CustomResourceDefinitions (vm-controller crds | kubectl apply -f -)",
		Flags: []cli.Flag{
			conversionFlag(&c.Conversion, "none: v1alpha1 and v1beta1, one schema; webhook: v1 as well, converted by vm-controller webhook"),
			installNamespaceFlag(&c.Namespace, "namespace of the webhook's Service (--conversion webhook)"),
			storageVersionFlag(&c.StorageVersion),
		},
		OnUsageError: usageError,
		Action:       action(c, noArgs, func(cc *cli.Context) error { return printCRDs(cc, *c) }),
	}
}

// Validate refuses a conversion other than none or webhook, a storage version the CRD does
// not have, webhook options without it, and with it a --namespace no namespace could have,
// as manifests refuses it (it was written into the conversion's Service, which the API
// server then could not reach).
func (c crdsConfig) Validate() error {
	if err := validConversion(c.Conversion); err != nil {
		return err
	}
	if err := validStorageVersion(c.Conversion, c.StorageVersion); err != nil {
		return err
	}
	if c.Conversion == "webhook" {
		if c.Namespace == "" {
			return errors.New("--conversion webhook needs --namespace, the webhook Service's")
		}
		if err := validLabel("namespace", c.Namespace); err != nil {
			return err
		}
	}
	return nil
}

// storageVersionFlag is --storage-version, of crds and manifests: both print the CRD, and an
// apply of either sets the version the API server stores objects in.
func storageVersionFlag(dst *string) cli.Flag {
	return &cli.StringFlag{Name: "storage-version", Usage: "version to store objects in (--conversion webhook); empty: v1alpha1. Once the CRD stores another (docs/versions.md), name it in every later apply of crds or manifests, an upgrade's too: " +
		"the API server would take v1alpha1 back as the storage version, store every later write in it and list it in status.storedVersions again",
		EnvVars: env("STORAGE_VERSION"), Destination: dst}
}

// validStorageVersion refuses, for crds and manifests alike, a storage version the webhook
// form of the CRD does not have, and one other than v1alpha1 for the plain form, which stores
// v1alpha1 only; empty is v1alpha1.
func validStorageVersion(conversion, version string) error {
	if version == "" {
		return nil
	}
	versions, err := crds.Versions()
	if err != nil {
		return fmt.Errorf("read the CRD's versions: %w", err)
	}
	if !slices.Contains(versions, version) {
		return fmt.Errorf("--storage-version %q: want one of %s", version, strings.Join(versions, ", "))
	}
	if conversion != "webhook" && version != "v1alpha1" {
		return fmt.Errorf("--storage-version %s needs --conversion webhook: the plain CRD stores v1alpha1", version)
	}
	return nil
}

// printCRDs prints the CRD in the form asked for.
func printCRDs(cc *cli.Context, c crdsConfig) error {
	var data []byte
	var err error
	if c.Conversion == "webhook" {
		warnUnreadNamespaceEnv(cc, c.Namespace)
		data, err = crds.WithWebhook(crds.Webhook{Namespace: c.Namespace, StorageVersion: c.StorageVersion})
	} else {
		data, err = crds.YAML()
	}
	if err != nil {
		return fmt.Errorf("render CRDs: %w", err)
	}
	_, err = cc.App.Writer.Write(data)
	return err
}
