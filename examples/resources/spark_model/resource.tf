# The model is on spark1 (downloaded once, or a Hugging Face cache snapshot);
# spark2 gets it over the fabric, from spark1, never through this machine.
resource "spark_model" "qwen" {
  source = {
    ssh_host = "10.1.230.180"
    path     = "/models/Qwen2.5-7B-Instruct"
  }
  targets = {
    spark2 = {
      ssh_host = "10.1.230.181"
      address  = "192.168.200.13" # spark2's fabric address: the copy arrives here
    }
  }
}

# Every node now has the same files at the same path.
output "model_path" {
  value = spark_model.qwen.source.path
}

# Or fetched from the Hugging Face Hub on spark1 with the Hub's own client
# (Ray's Python has it), then copied to spark2 the same way. source.commit
# is what "main" resolved to; vLLM loads source.path on both boxes.
resource "spark_model" "gemma" {
  python_command = "/opt/ray/bin/python"
  source = {
    ssh_host   = "10.1.230.180"
    repository = "google/gemma-3-27b-it"
    revision   = "main"
    token_wo   = var.hf_token # gated: write-only, never in state
  }
  targets = {
    spark2 = { ssh_host = "10.1.230.181", address = "192.168.200.13" }
  }
}

variable "hf_token" {
  type      = string
  sensitive = true
}
