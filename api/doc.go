// Package api holds gpufleet's public JSON wire types, the spec validation
// shared by the server and the CLI, the OpenAPI document and a small HTTP
// client. It imports only the standard library.
package api
