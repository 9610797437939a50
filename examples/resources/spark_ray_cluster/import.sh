# The head's ssh_host, then each worker as <name>=<ssh_host>.
terraform import spark_ray_cluster.lab '10.1.230.180,spark2=10.1.230.181'
