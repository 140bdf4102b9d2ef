// Package webhook is the CRD's conversion webhook: it answers the API server's
// ConversionReview (apiextensions.k8s.io/v1) over HTTPS by converting each object with
// package convert, between any two versions whose field maps it knows.
//
// Its serving certificate comes from files (a cert-manager Certificate, say), or the webhook
// manages one itself (Certs): a CA and a serving certificate for the Service's DNS names, kept
// in a Secret so that every replica serves the same, the CA's PEM injected into the CRD's
// spec.conversion.webhook.clientConfig.caBundle, and both renewed before they expire.
package webhook
