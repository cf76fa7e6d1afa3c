// Package crinet serves the CRI network API (package api/crinet/v1alpha1): networks
// set through it are validated, kept on disk and offered to pods through
// the same delegation path as NetworkAttachmentDefinitions (NADSource);
// the runtime's on-disk default configuration is listed as "_fallback".
package crinet
