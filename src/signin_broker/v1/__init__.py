"""Protobuf and gRPC modules of the v1 API, generated from proto/ by the build; never edit them."""
