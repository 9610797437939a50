#!/usr/bin/env bash
# Builds the pinned CLIs the tests and docs need into .tools/bin, from the Go module
# proxy only (no download sites are reachable from lab machines). Each tool is built
# once and reused while its version stamp matches.
set -euo pipefail
cd "$(dirname "$0")/.."

TERRAFORM_VERSION=1.8.5
OPENTOFU_VERSION=1.12.6
GOLANGCI_LINT_VERSION=2.15.0
TFPLUGINDOCS_VERSION=0.25.0
GORELEASER_VERSION=2.15.1

bin="$PWD/.tools/bin"
mkdir -p "$bin"
export GOBIN="$bin" GOFLAGS="${GOFLAGS:-} -buildvcs=false"

# have NAME VERSION: true when NAME was built at VERSION before.
have() { [ -x "$bin/$1" ] && [ "$(cat "$bin/.$1.version" 2>/dev/null)" = "$2" ]; }
stamp() { echo "$2" >"$bin/.$1.version"; }

build_terraform() {
  have terraform "$TERRAFORM_VERSION" && return
  echo "tools: building terraform $TERRAFORM_VERSION"
  # version.dev=no makes it report 1.8.5 instead of 1.8.5-dev.
  go install -trimpath -ldflags "-s -w -X github.com/hashicorp/terraform/version.dev=no" \
    "github.com/hashicorp/terraform@v$TERRAFORM_VERSION"
  stamp terraform "$TERRAFORM_VERSION"
}

build_tofu() {
  have tofu "$OPENTOFU_VERSION" && return
  echo "tools: building tofu $OPENTOFU_VERSION from module source"
  # OpenTofu's go.mod has replace directives, so `go install pkg@v` refuses it:
  # build inside a writable copy of the module directory instead.
  local src tmp
  src=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "github.com/opentofu/opentofu@v$OPENTOFU_VERSION" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
  tmp=$(mktemp -d)
  cp -r "$src/." "$tmp/"
  chmod -R u+w "$tmp"
  (cd "$tmp" && go build -trimpath -ldflags "-s -w -X github.com/opentofu/opentofu/version.dev=no" -o "$bin/tofu" ./cmd/tofu)
  rm -rf "$tmp"
  stamp tofu "$OPENTOFU_VERSION"
}

build_golangci_lint() {
  have golangci-lint "$GOLANGCI_LINT_VERSION" && return
  echo "tools: building golangci-lint $GOLANGCI_LINT_VERSION"
  go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v$GOLANGCI_LINT_VERSION"
  stamp golangci-lint "$GOLANGCI_LINT_VERSION"
}

build_tfplugindocs() {
  have tfplugindocs "$TFPLUGINDOCS_VERSION" && return
  echo "tools: building tfplugindocs $TFPLUGINDOCS_VERSION"
  go install "github.com/hashicorp/terraform-plugin-docs/cmd/tfplugindocs@v$TFPLUGINDOCS_VERSION"
  stamp tfplugindocs "$TFPLUGINDOCS_VERSION"
}

build_goreleaser() {
  have goreleaser "$GORELEASER_VERSION" && return
  echo "tools: building goreleaser $GORELEASER_VERSION"
  go install "github.com/goreleaser/goreleaser/v2@v$GORELEASER_VERSION"
  stamp goreleaser "$GORELEASER_VERSION"
}

want=("$@")
[ ${#want[@]} -gt 0 ] || want=(terraform tofu golangci-lint tfplugindocs goreleaser)
for t in "${want[@]}"; do
  # One build of a tool at a time: CI builds them all in the background
  # while `make demo` builds Terraform; the second to come waits, then
  # finds it built.
  exec {lock}>"$bin/.$t.lock"
  flock "$lock"
  case "$t" in
    terraform) build_terraform ;;
    tofu) build_tofu ;;
    golangci-lint) build_golangci_lint ;;
    tfplugindocs) build_tfplugindocs ;;
    goreleaser) build_goreleaser ;;
    *) echo "tools: unknown tool $t" >&2; exit 2 ;;
  esac
  exec {lock}>&-
done
