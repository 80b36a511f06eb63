package talos

// ServeTalos serves a Talos machines' state over COSI's gRPC server, for the package's external tests.
var ServeTalos = serveTalos
