// Package secrets seals team secrets for the store: AES-256-GCM with a key
// kept in a file of its own (0600, made at first start, or given by the
// operator), the team and name as additional data, so that a sealed value
// cannot be moved to another secret. The store keeps only sealed values; a
// value is opened only to start a workload that uses it.
//
// It imports core and store.
package secrets
