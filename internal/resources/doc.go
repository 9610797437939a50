// Package resources holds the provider's three resources over the domain
// packages that do the work on the nodes, each apply in its order and with
// its rollback: spark_ray_cluster (internal/raycluster), spark_vllm_deployment
// (internal/vllmdeploy) and spark_model (internal/modelcopy). It is more
// than glue: it decides when a change replaces a cluster or restarts a
// worker or a server, and which plan findings fail a plan and which only
// warn so a destroy is never blocked (diagnostics.go).
//
// Every resource has the same four files: <name>.go (the resource: create,
// read, update, delete, import), <name>_schema.go, <name>_model.go (its
// Terraform model and what the domain package takes), <name>_plan.go
// (ValidateConfig and ModifyPlan, one step per function). Shared by them:
// runtime_attribute.go (where Ray and vLLM run: host or container),
// diagnostics.go (findings as diagnostics, and the way through for destroy),
// imported.go (the mark an import leaves in private state), values.go.
package resources
