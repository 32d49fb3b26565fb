/* Files an upload would otherwise drop or send in vain: a file over its limit is refused here,
 * in one line naming it, before the browser reads it (dash's dcc.Upload drops a file over its
 * max_size, or of a type outside its accept, without a word; a larger body than the server
 * takes would be answered 413, also without a word).
 *
 * An upload so guarded sits in an element with
 *   data-upload-limit-bytes   the largest file the server takes, in bytes
 *   data-upload-message       the id of the line that answers the upload
 *   data-upload-refused       the refusal's first words ("Runs refused", "Upload rejected")
 *   data-upload-then          what follows the reason ("The previous fit is cleared.")
 *   data-upload-clear         JSON {component id: {prop: value}} reset on a refusal
 * Type, schema and every other check stay on the server, which checks the size again.
 */
(function () {
    "use strict";

    function kilobytes(bytes) {
        return (bytes / 1024).toLocaleString("en-US", {
            minimumFractionDigits: 1, maximumFractionDigits: 1,
        });
    }

    function refuse(guard, file) {
        const limit = Number(guard.dataset.uploadLimitBytes);
        const name = (file.name || "the file").slice(0, 80);
        const then = guard.dataset.uploadThen ? " " + guard.dataset.uploadThen : "";
        const text = (guard.dataset.uploadRefused || "Upload refused") + " — " + name + ": " +
            kilobytes(file.size) + " kB, over the " + Math.floor(limit / 1024) +
            " kB limit." + then;
        const setProps = window.dash_clientside && window.dash_clientside.set_props;
        if (!setProps) {
            return;
        }
        setProps(guard.dataset.uploadMessage, {children: text});
        const clear = guard.dataset.uploadClear ? JSON.parse(guard.dataset.uploadClear) : {};
        Object.keys(clear).forEach(function (id) { setProps(id, clear[id]); });
    }

    function check(event) {
        const target = event.target;
        const guard = target && target.closest && target.closest("[data-upload-limit-bytes]");
        if (!guard) {
            return;
        }
        const files = event.type === "drop"
            ? (event.dataTransfer && event.dataTransfer.files) : target.files;
        const limit = Number(guard.dataset.uploadLimitBytes);
        const big = Array.from(files || []).find(function (f) { return f.size > limit; });
        if (!big) {
            return;
        }
        // the upload never sees it: nothing is read, nothing is sent
        event.stopImmediatePropagation();
        event.preventDefault();
        if (event.type === "change") {
            target.value = "";
        }
        refuse(guard, big);
    }

    // capture on window: before React's own listeners on its root element
    window.addEventListener("change", check, true);
    window.addEventListener("drop", check, true);
}());
