// The editor's palette: the node kinds by group, each added by a click or dragged onto the canvas.
import { KIND_INFO, NODE_KINDS, type NodeKind } from "../../graph/kinds";

export function Palette({ onAdd, disabled }: { onAdd: (kind: NodeKind) => void; disabled: boolean }) {
  const groups = ["Flow", "Automation", "People", "Effects"] as const;
  return (
    <nav className="palette" aria-label="Node palette">
      <h2 className="h3">Add a node</h2>
      {groups.map((group) => (
        <div key={group} className="palette-group">
          <h3 className="palette-title">{group}</h3>
          <ul>
            {NODE_KINDS.filter((k) => KIND_INFO[k].group === group).map((kind) => (
              <li key={kind}>
                <button
                  type="button"
                  className="palette-item"
                  disabled={disabled}
                  draggable={!disabled}
                  data-kind={kind}
                  title={KIND_INFO[kind].description}
                  onDragStart={(e) => {
                    e.dataTransfer.setData("application/x-safest-kind", kind);
                    e.dataTransfer.effectAllowed = "copy";
                  }}
                  onClick={() => onAdd(kind)}
                >
                  {KIND_INFO[kind].label}
                </button>
              </li>
            ))}
          </ul>
        </div>
      ))}
    </nav>
  );
}
