// Command registry serves an in-memory OCI distribution registry (go-containerregistry's
// pkg/registry) on a loopback address, for the simulated cluster: the operator's pre-flight
// checks ask it whether a driver image exists, and tests push the images they need through
// its API. Optional Basic credentials (-user, -password) make it answer 401 without them.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	addr := flag.String("address", "127.0.0.1:0", "address to listen on (port 0: any free port)")
	user := flag.String("user", "", "require HTTP Basic credentials with this user name")
	password := flag.String("password", "", "the password that goes with -user")
	flag.Parse()

	listener, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("listen: %v", err)
	}
	var handler http.Handler = registry.New(registry.Logger(log.New(os.Stderr, "", log.LstdFlags)))
	if *user != "" {
		inner := handler
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u, p, ok := r.BasicAuth()
			if !ok || u != *user || p != *password {
				w.Header().Set("WWW-Authenticate", `Basic realm="registry"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED"}]}`, http.StatusUnauthorized)
				return
			}
			inner.ServeHTTP(w, r)
		})
	}
	// The first line on stdout is the address: the caller reads the port from it.
	fmt.Printf("listening on %s\n", listener.Addr())
	if err := http.Serve(listener, handler); err != nil {
		log.Fatal(err)
	}
}
