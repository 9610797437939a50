// Command terraform-provider-spark is the spark Terraform/OpenTofu provider.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/lab-infra/terraform-provider-spark/internal/provider"
)

// version is set by goreleaser.
var version = "dev"

func main() {
	var debug bool
	flag.BoolVar(&debug, "debug", false, "run with support for debuggers like delve")
	flag.Parse()
	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{
		Address: "registry.terraform.io/lab-infra/spark",
		Debug:   debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
