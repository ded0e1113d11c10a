// Command tagserver runs one map instance of tag (mapserver/tag), the image
// mapyard/tag. It is the map server of every other game: the same environment,
// healthcheck and life (app.Binary), with tag as its game.
//
// Usage:
//
//	tagserver              run, configured by MAP_* environment variables
//	tagserver healthcheck  exit 0 if the local map server answers /health
//	tagserver -h           list every variable with its default
package main

import (
	"os"

	"github.com/mapyard/mapyard/mapserver"
	"github.com/mapyard/mapyard/mapserver/app"
	"github.com/mapyard/mapyard/mapserver/tag"
)

func main() {
	b := app.Binary{Name: "tagserver", Title: "mapyard tag map server " + mapserver.Version, NewGame: tag.New}
	os.Exit(b.Run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}
