package supervise

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
)

// A map runs the image its template or its admin create named, else Options.Image; the
// host allows Options.Image and Options.Images, nothing else. The rules in this file are
// the only ones that speak of images: which one an instance runs, whether it may, why
// it cannot start, and which images the warm pool keeps spares of.

// notAllowed is the error of a map whose image the host does not allow.
func (s *Supervisor) notAllowed(image string) error {
	return apierr.Errorf(apierr.EIMAGENOTALLOWED, "image %q is not allowed on this host: maps may run %s (ORCH_MAP_IMAGE and ORCH_MAP_IMAGES)",
		image, strings.Join(s.allowedImages(), ", "))
}

// allowedImages lists the images maps may run, the default first, without repeats.
func (s *Supervisor) allowedImages() []string {
	out := []string{s.Image}
	for _, img := range s.Images {
		if img != "" && !slices.Contains(out, img) {
			out = append(out, img)
		}
	}
	return out
}

// imageUnavailable reports whether a start of in failed for want of its image (missing
// on the engine, or not allowed), with the reason an operator reads in /admin/maps and
// the map-state log: what is wrong and what to do.
func (s *Supervisor) imageUnavailable(in *instance, err error) (string, bool) {
	switch {
	case errors.Is(err, ErrImageMissing):
		return fmt.Sprintf("image %q is missing on the engine: build, pull or load it, then restart the map (POST /admin/maps/%s/restart)", in.Image, in.ID), true
	case apierr.Code(err) == apierr.EIMAGENOTALLOWED:
		return fmt.Sprintf("%s; allow it, then restart the map", apierr.Message(err)), true
	}
	return "", false
}

// setImageLocked records that in's container runs (or is about to run) image, moving
// its gauge. The caller holds s.mu.
func (s *Supervisor) setImageLocked(in *instance, image string) {
	if image == "" || image == in.Image {
		return
	}
	s.Metrics.setImage(in.State, in.Image, image)
	in.Image = image
}

// warmLocked makes the pool keep spares of image from now on. The caller holds s.mu.
func (s *Supervisor) warmLocked(image string) {
	if image == "" || image == s.Image || s.warm[image] {
		return
	}
	s.warm[image] = true
	s.kickPool()
}

// imageStartedLocked notes that a container of image started: the engine has it, so
// the pool keeps (and may again try) spares of it. The caller holds s.mu.
func (s *Supervisor) imageStartedLocked(image string) {
	s.warmLocked(image)
	if s.lacking[image] {
		delete(s.lacking, image)
		s.kickPool()
	}
}

// poolImagesLocked lists the images the pool keeps spares of, the default first: Image
// and every warm image, less those the engine lacked. The caller holds s.mu.
func (s *Supervisor) poolImagesLocked() []string {
	var out []string
	if !s.lacking[s.Image] {
		out = append(out, s.Image)
	}
	for _, img := range s.allowedImages()[1:] {
		if s.warm[img] && !s.lacking[img] {
			out = append(out, img)
		}
	}
	return out
}
