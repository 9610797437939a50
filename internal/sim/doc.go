// Package sim is a test double: simulated nodes, used only by the scale
// bench, because the lab has 2 cores and cannot host 256 nodes.
//
// Each simulated node is an SSH server (a real handshake and public key
// authentication, golang.org/x/crypto/ssh) that runs nothing: it answers
// the commands the provider sends from a model of a healthy Ray cluster
// (addresses, GPUs, Ray 2.52.1 on Python 3.11.2, who runs Ray where), with
// an artificial delay on every round trip. A command the model does not
// know fails loudly (exit 127, counted in Stats), so a new read the
// provider starts to send shows up in the bench instead of being answered
// with something made up.
//
// The bench (bench_test.go) runs the nodes in a child process and drives
// the provider in its own process through the provider protocol, as
// Terraform does (terraform.go), so the CPU time and peak RSS it reports
// are the provider's, not the simulated nodes'.
package sim
