// Package transport reaches nodes over SSH the way a careful operator would:
// one connection per (host, port, user) per provider process, host keys
// verified (known_hosts, a pinned key, or an explicit opt-out), dial and
// handshake bounded, keepalives with a reply deadline, bounded sessions, and
// commands built from argv with every element shell-quoted.
//
// It knows nothing of Ray, vLLM or Terraform.
package transport
