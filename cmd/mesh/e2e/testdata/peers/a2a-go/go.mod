// The a2a-go peer is its own module so that the client's gRPC dependencies
// stay out of the mesh's go.mod: github.com/a2aproject/a2a-go/a2aclient
// imports google.golang.org/grpc even when only JSON-RPC is used.
module github.com/agentmesh/agentmesh/cmd/mesh/e2e/testdata/peers/a2a-go

go 1.24.4

require github.com/a2aproject/a2a-go v0.3.3

require (
	github.com/google/uuid v1.6.0 // indirect
	golang.org/x/net v0.41.0 // indirect
	golang.org/x/sys v0.33.0 // indirect
	golang.org/x/text v0.26.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20250715232539-7130f93afb79 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20250715232539-7130f93afb79 // indirect
	google.golang.org/grpc v1.73.0 // indirect
	google.golang.org/protobuf v1.36.6 // indirect
)
