// The task page's keyboard help: a dialog listing the shortcuts, focused when it opens and giving
// focus back when it closes.
import { useEffect, useRef } from "react";

export function ShortcutHelp({ onClose }: { onClose: () => void }) {
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const previous = document.activeElement as HTMLElement | null;
    ref.current?.focus();
    return () => previous?.focus();
  }, []);
  return (
    // A click on the backdrop is the mouse's way out; the keyboard's are Escape and the Close button.
    // biome-ignore lint/a11y/noStaticElementInteractions: the backdrop is not a control, see above
    // biome-ignore lint/a11y/useKeyWithClickEvents: Escape closes the dialog, see above
    <div className="dialog-backdrop" onClick={onClose}>
      <div
        className="dialog"
        role="dialog"
        aria-modal="true"
        aria-labelledby="shortcuts-title"
        tabIndex={-1}
        ref={ref}
        onClick={(e) => e.stopPropagation()}
        onKeyDown={(e) => {
          if (e.key === "Escape") onClose();
        }}
      >
        <h2 id="shortcuts-title">Keyboard shortcuts</h2>
        <dl className="kv shortcuts">
          <div>
            <dt>
              <kbd>1</kbd>–<kbd>9</kbd>
            </dt>
            <dd>Choose an outcome</dd>
          </div>
          <div>
            <dt>
              <kbd>Ctrl</kbd> + <kbd>Enter</kbd>
            </dt>
            <dd>Submit the answer</dd>
          </div>
          <div>
            <dt>
              <kbd>c</kbd>
            </dt>
            <dd>Claim this task</dd>
          </div>
          <div>
            <dt>
              <kbd>v</kbd>
            </dt>
            <dd>Reveal or hide all media</dd>
          </div>
          <div>
            <dt>
              <kbd>n</kbd>
            </dt>
            <dd>Next task in this queue</dd>
          </div>
          <div>
            <dt>
              <kbd>?</kbd>
            </dt>
            <dd>This list</dd>
          </div>
        </dl>
        <button type="button" className="btn" onClick={onClose}>
          Close
        </button>
      </div>
    </div>
  );
}
