package telemetry

import "testing"

func TestDestinationTemplateHidesIDs(t *testing.T) {
	for subject, want := range map[string]string{
		"mesh.work.agent.resource-manager.0b64f907-f477-4e1a-a531-e643becd27bd": "mesh.work.agent.resource-manager.{conversation}",
		"acme.work.group.team.c1":                                    "acme.work.group.team.{conversation}",
		"mesh.approval.08ae76b7-5b0b-5cad-930a-e77ec22f9dc1.request": "mesh.approval.{approval}.request",
		"mesh.tool.resources.resources_list":                         "mesh.tool.resources.resources_list",
		"mesh.work.agent":                                            "mesh.work.agent",
	} {
		if got := DestinationTemplate(subject); got != want {
			t.Errorf("DestinationTemplate(%s) = %s, want %s", subject, got, want)
		}
	}
}
