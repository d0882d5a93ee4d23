// Package config holds the one Config struct of the gpufleet server:
// built as Default(), then the file given with --config (Load), then
// flags, then Validate(). After start-up it is read-only and passed down as
// a value. It owns the server's settings and their defaults: clusters and
// pools, priority classes, the scheduler's options, usage and reclaim
// rules, qualification, storage, limits, the local executor's options,
// currency and prices.
//
// It imports api (quantities), cost (price versions) and sigs.k8s.io/yaml;
// never the store, the scheduler or an executor.
package config
