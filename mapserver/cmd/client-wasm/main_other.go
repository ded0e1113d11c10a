//go:build !(js && wasm)

package main

import (
	"fmt"
	"os"
)

// main explains, off WebAssembly, what this program is: the browser client's module,
// built with GOOS=js GOARCH=wasm (make page) and served by the edge.
func main() {
	fmt.Fprintln(os.Stderr, "client-wasm is the browser client's WebAssembly module: build it with GOOS=js GOARCH=wasm (make page)")
	os.Exit(2)
}
