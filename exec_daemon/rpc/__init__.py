"""The RPC layer: the Connect/gRPC front door, ExecStream, ControlService and the dispatcher."""
