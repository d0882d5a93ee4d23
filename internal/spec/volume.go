package spec

import (
	"regexp"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// CheckVolume checks a volume as created.
func CheckVolume(v api.Volume) []api.FieldError {
	var errs problems
	if !core.ValidName(v.Name) {
		errs.add("name", "must be lowercase letters, digits and '-', at most %d characters", core.MaxNameLen)
	}
	if v.SizeBytes <= 0 || v.SizeBytes > quantity.MaxSizeBytes {
		errs.add("sizeBytes", "want a size from 1 byte to 1 PiB (--size 100GiB)")
	}
	return errs
}

// secretKeyRE is a secret key: a file name, as Kubernetes allows in a
// Secret (letters, digits, '-', '_', '.'), not '.' or '..' (checked apart),
// so that it can become a file; core.EnvNameRE says which keys can become
// environment variables too.
var secretKeyRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// CheckSecret checks a secret as created: a name, keys that are file names
// (no path, no traversal), at most MaxSecretBytes in all.
func CheckSecret(s api.Secret) []api.FieldError {
	var errs problems
	if !core.ValidName(s.Name) {
		errs.add("name", "must be lowercase letters, digits and '-', at most %d characters", core.MaxNameLen)
	}
	switch {
	case len(s.Data) == 0:
		errs.add("data", "a secret needs at least one key")
	case len(s.Data) > MaxSecretKeys:
		errs.add("data", "at most %d keys", MaxSecretKeys)
	}
	size := 0
	for k, v := range s.Data {
		size += len(k) + len(v)
		if !secretKeyRE.MatchString(k) || k == "." || k == ".." {
			errs.add("data."+k, "a key is a file name: letters, digits, '-', '_' and '.', at most 64, not . or .. (an environment variable name, such as HF_TOKEN, to use it with secretEnv)")
		}
	}
	if size > MaxSecretBytes {
		errs.add("data", "the keys and values are over 1 MiB")
	}
	return errs
}
