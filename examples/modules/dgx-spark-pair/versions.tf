terraform {
  # Terraform 1.8 and OpenTofu 1.8 and later (the module's tests run on both).
  required_version = ">= 1.8.0"
  required_providers {
    spark = {
      source  = "lab-infra/spark"
      version = ">= 0.1.0, < 1.0.0"
    }
  }
}
