package main

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestPortal_ToDefaultMapReachesDefaultInstance runs a kit whose default instance is
// not default-1 (ORCH_DEFAULT_INSTANCE_ID=<deployment>-d) and takes a character from the
// default map to another map and back through a portal that names only the default
// map: it must come back to the running default instance, and no second default map
// (default-1) may be started.
func TestPortal_ToDefaultMapReachesDefaultInstance(t *testing.T) {
	k := newKit(t)
	other := flatMap(t, "s4-"+randomHex(t, 3))
	k.createMap(t, other)

	j := k.join(t, fmt.Sprintf(`{"authKey":%q}`, testutil.NewAuthKey(t)))
	if j.InstanceID != k.def {
		t.Fatalf("joined %s, want the default instance %s", j.InstanceID, k.def)
	}
	out := transferAt(t, k.orch.control, k.mapCred(t, j.InstanceID), j, other.MapID, 3, 3, `{}`)
	otherCred := k.mapCred(t, other.InstanceID)
	var in mapcontract.RedeemResult
	testutil.PostJSON(t, k.orch.control+mapcontract.PathRedeem, otherCred,
		fmt.Sprintf(`{"instanceId":%q,"token":%q}`, other.InstanceID, out.Token), http.StatusOK, &in)
	testutil.PostJSON(t, k.orch.control+mapcontract.PathTransferResult, otherCred,
		fmt.Sprintf(`{"transferId":%q,"instanceId":%q,"success":true}`, out.TransferID, other.InstanceID), http.StatusOK, nil)

	var back mapcontract.TransferAnswer
	testutil.PostJSON(t, k.orch.control+mapcontract.PathRequestTransfer, otherCred,
		fmt.Sprintf(`{"transferId":"tr-back-%s","characterId":%q,"fromInstanceId":%q,"toMapId":%q,"epoch":%d,"state":{"mapId":%q,"x":3,"y":3,"attributes":{},"revision":%d}}`,
			randomHex(t, 4), in.CharacterID, other.InstanceID, mapgen.DefaultMapID, in.Epoch, other.MapID, in.Epoch*10+1),
		http.StatusOK, &back)
	if back.ToInstanceID != k.def {
		t.Fatalf("the portal to the default map leads to %s, want the default instance %s", back.ToInstanceID, k.def)
	}
	testutil.GetJSON(t, k.orch.control+httpapi.PathAdminMaps+"/"+mapgen.DefaultInstanceID, k.secret, http.StatusNotFound, nil)
}
