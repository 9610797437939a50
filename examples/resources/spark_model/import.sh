# <source ssh_host>:<source path>. The manifest is read at the source; the
# targets come from the configuration (files already there are not copied).
terraform import spark_model.qwen 10.1.230.180:/models/Qwen2.5-7B-Instruct
