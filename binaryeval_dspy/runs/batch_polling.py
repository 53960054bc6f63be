"""Step 4 of a batch invocation: poll the provider's batches and download the files of those that ended."""

from __future__ import annotations

from binaryeval_dspy.programs.bineval import error_text


class _Polling:
    """Step 4 of a batch invocation, as a method of `_Run` (`binaryeval_dspy.runs.batch_run`)."""

    # ------------------------------------------------------------ 4. poll

    def poll(self) -> None:
        for sub in self.state.submissions:
            if sub.phase != "submitted" or (sub.ended and sub.downloaded):
                continue
            try:
                info = self.api.retrieve(sub.batch_id)  # type: ignore[arg-type]
            except Exception as exc:  # noqa: BLE001 - reported; the next run polls again
                self.problem(f"batch {sub.batch_id}: could not be polled ({error_text(exc, 300)})")
                continue
            sub.update_from(info)
            self.save()
            if not sub.ended:
                continue
            try:
                for kind, file_id in (("output", sub.output_file_id), ("errors", sub.error_file_id)):
                    if file_id:
                        self.store.write(self.store.download_path(sub.number, kind), self.api.content(file_id))
            except Exception as exc:  # noqa: BLE001 - reported; the next run downloads again
                self.problem(f"batch {sub.batch_id}: its results could not be downloaded ({error_text(exc, 300)})")
                continue
            sub.downloaded = True
            self.save()
            self.outcomes.pop(sub.number, None)
            counts = sub.request_counts
            self.emit(f"batch {sub.batch_id} {sub.status}: {counts.get('completed', 0)} request(s) answered, "
                      f"{counts.get('failed', 0)} failed; results downloaded")
