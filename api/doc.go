// Package api holds gpufleet's public JSON wire types, their strict
// decoding (DecodeStrict: every problem named by its field), the OpenAPI
// document and a small HTTP client. It holds no domain rules: the checks of
// what a client submits, money and quantities live in the server's
// packages and are applied at the edge. Money and Milli are aliases of
// internal/core/quantity's types, whose JSON form is their own; api imports
// only that package and the standard library.
package api
