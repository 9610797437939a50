package preflight

import (
	"fmt"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/pyversion"
)

// The Ray releases whose message definitions the plan's reader of Ray's
// tables (internal/raygcs) was checked against, as their wheels ship them:
// 2.9.3, 2.35.0, 2.36.0 and every minor from 2.40.0 to 2.60.0
// (internal/raygcs/testdata/descriptors, TestReaderAgainstEachReleasesDescriptors).
const (
	OldestRayChecked = "2.9.3"
	NewestRayChecked = "2.60"
)

// RayRelease (D24): a Ray older than the oldest release checked may lay
// out its tables otherwise, and a misread table is a wrong plan (every GPU
// free, a dead head alive), so it is refused; one newer than the newest
// checked is read, with a warning that the reader has not seen it. path
// is the attribute that leads to that Ray; what names where it runs.
func RayRelease(version, what string, path finding.Path) []finding.Finding {
	v, err := pyversion.Parse(version)
	if err != nil || version == "" {
		return nil // no Ray, or no version: D6 names it
	}
	switch {
	case !v.AtLeast(2, 9, 3):
		return []finding.Finding{{Rule: D24, Path: path, Summary: "Ray is older than the releases the plan can read",
			Detail: fmt.Sprintf("Ray %s runs on %s. The plan reads Ray's node table and placement groups by their message layout, "+
				"checked on Ray %s to %s; an older release may lay them out otherwise, and a misread table makes a wrong plan. "+
				"Install Ray %s or later.", version, what, OldestRayChecked, NewestRayChecked, OldestRayChecked)}}
	case v.AtLeast(2, 61):
		return []finding.Finding{{Rule: D24, Warning: true, Path: path, Summary: "Ray is newer than the releases the plan was checked on",
			Detail: fmt.Sprintf("Ray %s runs on %s; the plan's reader of Ray's tables was checked on Ray %s to %s. "+
				"It reads this one the same way; if the plan's view of the nodes or GPUs looks wrong, `ray status` on the head is the truth.",
				version, what, OldestRayChecked, NewestRayChecked)}}
	}
	return nil
}
