package talos

// ServeTalos serves a Talos machines' state over COSI's gRPC server, for the package's external tests, with
// the watches over the stream client, as talos-ccm connects: their sessions park between messages.
var ServeTalos = serveTalosStreams
