"""The receiver's fault wrapper (tests and demos only), on any backend."""


def test_the_fault_wrapper_reads_its_setting_once_per_request(settings, tmp_path, rf):
    # A live server's thread may still answer a call when a test's override of the setting ends.
    from django.conf import settings as live_settings
    from django.http import HttpResponse

    from delivery.faults import injects_faults

    observed = tmp_path / "calls.log"
    settings.RECEIVER_FAULTS = {"observe": str(observed)}

    @injects_faults
    def view(request):
        live_settings.RECEIVER_FAULTS = (
            None  # the override ends while the request is being answered
        )
        return HttpResponse("created", status=201)

    assert view(rf.post("/delivery/api/tasks")).status_code == 201
    assert observed.read_text().startswith("POST ")
