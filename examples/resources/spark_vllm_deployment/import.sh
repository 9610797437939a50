# <head ssh_host>:<port>. Model, sizes, VLLM_HOST_IP and RAY_ADDRESS are read from the running server.
terraform import spark_vllm_deployment.qwen 10.1.230.180:8000
