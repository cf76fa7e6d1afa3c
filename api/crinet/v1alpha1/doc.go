// Package v1alpha1 is the CRI network API's protocol: crinet.proto and the Go
// code protoc generates from it (make crinet-proto).
package v1alpha1
