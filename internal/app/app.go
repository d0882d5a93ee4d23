// Package app builds the whole server from a Config and runs it until the
// context ends. It holds wiring only.
package app

import (
	"context"
	"errors"
	"io"

	"github.com/gpufleet/gpufleet/internal/config"
)

// Run starts the server described by cfg and blocks until ctx is done or the
// server fails. It prints the API address and the admin token's path to out.
func Run(ctx context.Context, cfg config.Config, out io.Writer) error {
	return errors.New("not yet wired")
}
