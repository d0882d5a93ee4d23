// Package portal serves gpufleet's web portal: a single page of HTML, CSS
// and JavaScript modules embedded in the binary (assets/, with embed.FS),
// with no build step and nothing fetched from elsewhere. The assets carry
// no data and are public; the page reads everything from the REST API
// under /api/v1 with the Bearer token the user signs in with, which it
// keeps in the tab's sessionStorage, so it shows nothing the token could
// not read and decides nothing.
//
// The portal owns two paths: "/" (the page) and "/ui/..." (its assets),
// served with a strict Content-Security-Policy. With wraps the API server
// so that every other path, /api/ included, goes to it unchanged.
//
// It imports the standard library only.
package portal
